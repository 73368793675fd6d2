# written by pftnet report; to restyle, edit and rerun in this folder: gnuplot graph10-acc-bytes.gp
set terminal svg size 860,520 dynamic noenhanced font 'Sans,12' background rgb 'white'
set output 'graph10-acc-bytes.svg'
set title 'graph10: accuracy vs communication'
set datafile missing '?'
set grid ytics
set key below
set border 3
set tics nomirror
set linetype 1 lc rgb '#1f77b4'
set linetype 2 lc rgb '#d62728'
set linetype 3 lc rgb '#2ca02c'
set linetype 4 lc rgb '#9467bd'
set linetype 5 lc rgb '#ff7f0e'
set linetype 6 lc rgb '#8c564b'
set linetype 7 lc rgb '#e377c2'
set linetype 8 lc rgb '#17becf'
set logscale x 10
set xrange [129125:3.58454e+08]
set yrange [53:84]
set format x '%.0s %cB'
set mxtics 10
set xtics (200000, 500000, 1e+06, 2e+06, 5e+06, 1e+07, 2e+07, 5e+07, 1e+08, 2e+08)
set xlabel 'bytes communicated (log scale)'
set ylabel 'accuracy (%)'
plot 'graph10-acc-bytes.dat' index 0 using 1:2:3 with yerrorbars pt 5 ps 1.4 lc rgb '#d62728' title 'baselines', \
     'graph10-acc-bytes.dat' index 1 using 1:2:3 with yerrorbars pt 7 ps 1.4 lc rgb '#1f77b4' title 'FedPFT and exact statistics', \
     'graph10-acc-bytes.dat' index 2 using 1:2:3 with labels left notitle, \
     'graph10-acc-bytes.dat' index 3 using 1:2:3 with labels right notitle
