set terminal pngcairo size 900,600 noenhanced
set output 'docs/bench/dojo_planning_quadruped.png'
set title 'iLQR on quadruped: goal violation against iteration'
set xlabel 'iteration'
set ylabel 'goal violation (max |entry|)'
set grid
set key outside right top
set logscale y
plot 'docs/bench/dojo_planning_quadruped.dat' index 0 using 1:2 with linespoints lw 2 pt 7 title 'mujoco', 'docs/bench/dojo_planning_quadruped.dat' index 1 using 1:2 with linespoints lw 2 pt 7 title 'ipm (kappa_grad 1e-2)', 'docs/bench/dojo_planning_quadruped.dat' index 2 using 1:2 with linespoints lw 2 pt 7 title 'ipm (kappa_grad = kappa_tol)', 'docs/bench/dojo_planning_quadruped.dat' index 3 using 1:2 with linespoints lw 2 pt 7 title 'comfree', 'docs/bench/dojo_planning_quadruped.dat' index 4 using 1:2 with linespoints lw 2 pt 7 title 'comfree (anchor 0)', 'docs/bench/dojo_planning_quadruped.dat' index 5 using 1:2 with linespoints lw 2 pt 7 title 'lcp', 'docs/bench/dojo_planning_quadruped.dat' index 6 using 1:2 with linespoints lw 2 pt 7 title 'MuJoCo mjd_transitionFD', 'docs/bench/dojo_planning_quadruped.dat' index 7 using 1:2 with linespoints lw 2 pt 7 title 'Adam: mujoco', 'docs/bench/dojo_planning_quadruped.dat' index 8 using 1:2 with linespoints lw 2 pt 7 title 'Adam: ipm (kappa_grad 1e-2)', 'docs/bench/dojo_planning_quadruped.dat' index 9 using 1:2 with linespoints lw 2 pt 7 title 'Adam: comfree (anchor 0)', 'docs/bench/dojo_planning_quadruped.dat' index 10 using 1:2 with linespoints lw 2 pt 7 title 'Adam: lcp', 'docs/bench/dojo_planning_quadruped.dat' index 11 using 1:2 with linespoints lw 2 pt 7 title 'Adam: lcp (complementarity-aware)'
