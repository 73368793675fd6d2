# written by pftnet report; to restyle, edit and rerun in this folder: gnuplot ring8-accuracy.gp
set terminal svg size 860,520 dynamic noenhanced font 'Sans,12' background rgb 'white'
set output 'ring8-accuracy.svg'
set title 'ring8: accuracy per node'
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
set yrange [32:83]
set xlabel 'node (in processing order)'
set ylabel 'accuracy on the union of test splits (%)'
set offsets 0.3, 0.3, 0, 0
centralized = 76.5432
centralized_gaussian = 79.4127
plot 'ring8-accuracy.dat' index 0 using 1:3:4:xtic(2) with yerrorbars ps 1.3 pt 7 title 'FedPFT diag K=10', \
     'ring8-accuracy.dat' index 1 using 1:3:4 with yerrorbars ps 1.3 pt 7 title 'Exact LDA (tied, gaussian head)', \
     'ring8-accuracy.dat' index 2 using 1:3:4 with yerrorbars ps 1.3 pt 7 title 'Exact LDA, full scatter (research)', \
     'ring8-accuracy.dat' index 3 using 1:3:4 with yerrorbars pt 6 ps 1.3 lc rgb '#888888' title 'local only', \
     centralized with lines dt 2 lw 2 lc rgb '#333333' title 'centralized', \
     centralized_gaussian with lines dt 3 lw 2 lc rgb '#777777' title 'centralized Gaussian (LDA)'
