set terminal pngcairo size 900,550 noenhanced
set output 'docs/bench/sysid_panda.png'
set title 'panda: recorded sensors and rollouts (contactkit, identified)'
set xlabel 'time (s)'
set grid
set key outside right top
plot 'docs/bench/sysid_panda.dat' using 1:2 with points pt 7 ps 0.4 title 'q1: data', 'docs/bench/sysid_panda.dat' using 1:3 with lines lw 1 dt 2 title 'q1: start', 'docs/bench/sysid_panda.dat' using 1:4 with lines lw 2 title 'q1: identified', 'docs/bench/sysid_panda.dat' using 1:5 with points pt 7 ps 0.4 title 'q3: data', 'docs/bench/sysid_panda.dat' using 1:6 with lines lw 1 dt 2 title 'q3: start', 'docs/bench/sysid_panda.dat' using 1:7 with lines lw 2 title 'q3: identified'
