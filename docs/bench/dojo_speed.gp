set terminal pngcairo size 900,600 noenhanced
set output 'docs/bench/dojo_speed.png'
set title '1000 steps at h = 0.01 plus a Jacobian per step'
set xlabel ''
set ylabel 'total time (s)'
set grid
set key outside right top
set xrange [-0.5:3.5]
set xtics rotate by -30 ('Humanoid' 0, 'Unitree A1' 1, 'Franka Panda' 2, 'Skydio X2' 3)
set logscale y
plot 'docs/bench/dojo_speed.dat' index 0 using 1:2 with linespoints lw 2 pt 7 title 'mujoco', 'docs/bench/dojo_speed.dat' index 1 using 1:2 with linespoints lw 2 pt 7 title 'ipm', 'docs/bench/dojo_speed.dat' index 2 using 1:2 with linespoints lw 2 pt 7 title 'comfree', 'docs/bench/dojo_speed.dat' index 3 using 1:2 with linespoints lw 2 pt 7 title 'lcp'
