set terminal pngcairo size 900,550 noenhanced
set output 'docs/bench/sysid_cube.png'
set title 'cube: recorded sensors and rollouts (contactkit, identified)'
set xlabel 'time (s)'
set grid
set key outside right top
plot 'docs/bench/sysid_cube.dat' using 1:2 with points pt 7 ps 0.4 title 'x: data', 'docs/bench/sysid_cube.dat' using 1:3 with lines lw 1 dt 2 title 'x: start', 'docs/bench/sysid_cube.dat' using 1:4 with lines lw 2 title 'x: identified', 'docs/bench/sysid_cube.dat' using 1:5 with points pt 7 ps 0.4 title 'z: data', 'docs/bench/sysid_cube.dat' using 1:6 with lines lw 1 dt 2 title 'z: start', 'docs/bench/sysid_cube.dat' using 1:7 with lines lw 2 title 'z: identified'
