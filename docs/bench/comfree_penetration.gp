set terminal pngcairo size 900,600 noenhanced
set output 'docs/bench/comfree_penetration.png'
set title 'Dense drop: penetration over all contacts'
set xlabel ''
set ylabel 'depth (mm)'
set grid
set key outside right top
set xrange [-0.5:14.5]
set xtics rotate by -30 ('mujoco' 0, 'ipm' 1, 'comfree 0.1, 0.001' 2, 'comfree 0.1, 0.005' 3, 'comfree 0.3, 0.001' 4, 'comfree 0.3, 0.005' 5, 'comfree 0.5, 0.001' 6, 'comfree 0.5, 0.005' 7, 'comfree (anchor 0) 0.1, 0.001' 8, 'comfree (anchor 0) 0.1, 0.005' 9, 'comfree (anchor 0) 0.3, 0.001' 10, 'comfree (anchor 0) 0.3, 0.005' 11, 'comfree (anchor 0) 0.5, 0.001' 12, 'comfree (anchor 0) 0.5, 0.005' 13, 'lcp' 14)
plot 'docs/bench/comfree_penetration.dat' index 0 using 1:2 with linespoints lw 2 pt 7 title 'mean depth', 'docs/bench/comfree_penetration.dat' index 1 using 1:2 with linespoints lw 2 pt 7 title 'max depth / 10'
