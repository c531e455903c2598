set terminal pngcairo size 900,600 noenhanced
set output 'docs/bench/diffmjx_toss.png'
set title 'Cube toss (DiffMJX Fig. 5/17): gradient'
set xlabel 'gradient time (ms)'
set ylabel 'relative gradient error'
set grid
set key outside right top
set logscale x
set logscale y
plot 'docs/bench/diffmjx_toss.dat' index 0 using 1:2 with linespoints lw 2 pt 7 title 'euler', 'docs/bench/diffmjx_toss.dat' index 1 using 1:2 with linespoints lw 2 pt 7 title 'rk4', 'docs/bench/diffmjx_toss.dat' index 2 using 1:2 with linespoints lw 2 pt 7 title 'tsit5', 'docs/bench/diffmjx_toss.dat' index 3 using 1:2 with linespoints lw 2 pt 7 title 'dopri5'
