set terminal pngcairo size 900,600 noenhanced
set output 'docs/bench/dojo_drop.png'
set title 'Humanoid drop: deepest floor penetration'
set xlabel 'timestep (s)'
set ylabel 'max penetration (mm)'
set grid
set key outside right top
set logscale x
set logscale y
plot 'docs/bench/dojo_drop.dat' index 0 using 1:2 with linespoints lw 2 pt 7 title 'mujoco', 'docs/bench/dojo_drop.dat' index 1 using 1:2 with linespoints lw 2 pt 7 title 'ipm', 'docs/bench/dojo_drop.dat' index 2 using 1:2 with linespoints lw 2 pt 7 title 'comfree', 'docs/bench/dojo_drop.dat' index 3 using 1:2 with linespoints lw 2 pt 7 title 'lcp'
