set terminal pngcairo size 900,550 noenhanced
set output 'docs/bench/sysid_panda.png'
set title 'panda: rollouts minus recorded sensors (contactkit, identified)'
set xlabel 'time (s)'
set grid
set key outside right top
plot 'docs/bench/sysid_panda.dat' using 1:($3-$2) with lines lw 1 dt 2 title 'tau1 (Nm): start - data', 'docs/bench/sysid_panda.dat' using 1:($4-$2) with lines lw 2 title 'tau1 (Nm): identified - data', 'docs/bench/sysid_panda.dat' using 1:($6-$5) with lines lw 1 dt 2 title 'tau2 (Nm): start - data', 'docs/bench/sysid_panda.dat' using 1:($7-$5) with lines lw 2 title 'tau2 (Nm): identified - data'
