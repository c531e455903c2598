# MuJoCo from the `mujoco` Python package (pip install mujoco): the wheel ships libmujoco.so.<version>
# and include/mujoco/ inside the package. Defines the imported target mujoco::mujoco and
# mujoco_VERSION, as MuJoCo's own CMake package does. CK_MUJOCO_PYTHON names the interpreter whose
# site-packages hold the wheel.
if(TARGET mujoco::mujoco)
  return()
endif()
if(NOT CK_MUJOCO_PYTHON AND Python_EXECUTABLE)
  set(CK_MUJOCO_PYTHON "${Python_EXECUTABLE}")  # scikit-build-core's interpreter
endif()
if(NOT CK_MUJOCO_PYTHON)
  find_package(Python3 COMPONENTS Interpreter REQUIRED)
  set(CK_MUJOCO_PYTHON "${Python3_EXECUTABLE}")
endif()
execute_process(
  COMMAND "${CK_MUJOCO_PYTHON}" -c
    "import importlib.util as u, importlib.metadata as m, os; s = u.find_spec('mujoco'); print(os.path.dirname(s.origin) + ';' + m.version('mujoco'))"
  RESULT_VARIABLE ck_mj_rc OUTPUT_VARIABLE ck_mj_out ERROR_VARIABLE ck_mj_err
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT ck_mj_rc EQUAL 0)
  message(FATAL_ERROR "MuJoCo from Python: '${CK_MUJOCO_PYTHON}' has no `mujoco` package "
                      "(pip install mujoco, or tools/setup.sh for the pinned version): ${ck_mj_err}")
endif()
list(GET ck_mj_out 0 ck_mj_dir)
list(GET ck_mj_out 1 mujoco_VERSION)
set(ck_mj_lib "${ck_mj_dir}/libmujoco.so.${mujoco_VERSION}")
if(NOT EXISTS "${ck_mj_lib}" OR NOT EXISTS "${ck_mj_dir}/include/mujoco/mujoco.h")
  message(FATAL_ERROR "MuJoCo from Python: the mujoco ${mujoco_VERSION} package in ${ck_mj_dir} "
                      "has no libmujoco.so.${mujoco_VERSION} or include/mujoco/mujoco.h")
endif()
add_library(mujoco::mujoco SHARED IMPORTED)
set_target_properties(mujoco::mujoco PROPERTIES
  IMPORTED_LOCATION "${ck_mj_lib}"
  IMPORTED_SONAME "libmujoco.so.${mujoco_VERSION}"
  INTERFACE_INCLUDE_DIRECTORIES "${ck_mj_dir}/include")
set(mujoco_LIBRARY_DIR "${ck_mj_dir}")
set(CK_MUJOCO_PYTHON_USED "${CK_MUJOCO_PYTHON}")
message(STATUS "MuJoCo ${mujoco_VERSION} from the Python package in ${ck_mj_dir}")
