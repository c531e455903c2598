set terminal pngcairo size 900,600 noenhanced
set output '/tmp/robots_out/robots_penetration.png'
set title 'deepest penetration over all cases that did not diverge'
set xlabel ''
set ylabel 'max penetration (mm)'
set grid
set key outside right top
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set datafile missing '-'
set xtics rotate by -30
set logscale y
plot '/tmp/robots_out/robots_penetration.dat' using 2:xtic(1) title 'mujoco', '/tmp/robots_out/robots_penetration.dat' using 3 title 'ipm', '/tmp/robots_out/robots_penetration.dat' using 4 title 'comfree', '/tmp/robots_out/robots_penetration.dat' using 5 title 'lcp'
