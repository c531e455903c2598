set terminal pngcairo size 900,600 noenhanced
set output 'docs/bench/nimble_jacobian.png'
set title 'Jacobian time'
set xlabel ''
set ylabel 'time per Jacobian (ms)'
set grid
set key outside right top
set xrange [-0.5:4.5]
set xtics rotate by -30 ('Humanoid' 0, 'Hopper' 1, 'Unitree A1' 2, 'Franka Panda' 3, 'Skydio X2' 4)
set logscale y
plot 'docs/bench/nimble_jacobian.dat' index 0 using 1:2 with linespoints lw 2 pt 7 title 'MuJoCo central differences', 'docs/bench/nimble_jacobian.dat' index 1 using 1:2 with linespoints lw 2 pt 7 title 'ipm analytic', 'docs/bench/nimble_jacobian.dat' index 2 using 1:2 with linespoints lw 2 pt 7 title 'comfree analytic', 'docs/bench/nimble_jacobian.dat' index 3 using 1:2 with linespoints lw 2 pt 7 title 'lcp analytic'
