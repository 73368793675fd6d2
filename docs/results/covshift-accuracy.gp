# written by pftnet report; to restyle, edit and rerun in this folder: gnuplot covshift-accuracy.gp
set terminal svg size 860,520 dynamic noenhanced font 'Sans,12' background rgb 'white'
set output 'covshift-accuracy.svg'
set title 'covshift: accuracy per hop'
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
set yrange [47:91]
set xlabel 'hop (node)'
set ylabel 'accuracy on the union of test splits (%)'
set offsets 0.3, 0.3, 0, 0
centralized = 85.7909
centralized_gaussian = 88.5612
plot 'covshift-accuracy.dat' index 0 using 1:3:4:xtic(2) with yerrorlines lw 2 pt 7 title 'FedPFT diag K=10', \
     'covshift-accuracy.dat' index 1 using 1:3:4 with yerrorlines lw 2 pt 7 title 'FedPFT diag K=20', \
     'covshift-accuracy.dat' index 2 using 1:3:4 with yerrorlines lw 2 pt 7 title 'DP-FedPFT diag K=1, eps=1, delta=1/n', \
     'covshift-accuracy.dat' index 3 using 1:3:4 with yerrorlines lw 2 pt 7 title 'FedPFT spher K=1', \
     'covshift-accuracy.dat' index 4 using 1:3:4 with yerrorlines lw 2 pt 7 title 'Exact LDA (tied, gaussian head)', \
     'covshift-accuracy.dat' index 5 using 1:3:4 with yerrorlines lw 2 pt 7 title 'DP exact LDA, eps=1', \
     'covshift-accuracy.dat' index 6 using 1:3:4 with yerrorlines lw 2 pt 7 title 'Exact LDA, full scatter (research)', \
     'covshift-accuracy.dat' index 7 using 1:3:4 with yerrorbars pt 6 ps 1.3 lc rgb '#888888' title 'local only', \
     centralized with lines dt 2 lw 2 lc rgb '#333333' title 'centralized', \
     centralized_gaussian with lines dt 3 lw 2 lc rgb '#777777' title 'centralized Gaussian (LDA)'
