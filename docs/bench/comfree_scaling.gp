set terminal pngcairo size 900,600 noenhanced
set output 'docs/bench/comfree_scaling.png'
set title 'Step time against contact count'
set xlabel 'contacts'
set ylabel 'step time (ms)'
set grid
set key outside right top
set logscale x
set logscale y
plot 'docs/bench/comfree_scaling.dat' index 0 using 1:2 with linespoints lw 2 pt 7 title 'mujoco', 'docs/bench/comfree_scaling.dat' index 1 using 1:2 with linespoints lw 2 pt 7 title 'ipm', 'docs/bench/comfree_scaling.dat' index 2 using 1:2 with linespoints lw 2 pt 7 title 'comfree', 'docs/bench/comfree_scaling.dat' index 3 using 1:2 with linespoints lw 2 pt 7 title 'lcp'
