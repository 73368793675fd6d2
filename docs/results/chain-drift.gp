# written by pftnet report; to restyle, edit and rerun in this folder: gnuplot chain-drift.gp
set terminal svg size 860,520 dynamic noenhanced font 'Sans,12' background rgb 'white'
set output 'chain-drift.svg'
set title 'chain: how well the GMMs describe each node''s own data'
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
set xlabel 'hop (node)'
set ylabel 'own rows: average log-likelihood'
set offsets 0.3, 0.3, 0, 0
plot 'chain-drift.dat' index 0 using 1:3:4:xtic(2) with yerrorlines lw 2 pt 7 title 'FedPFT diag K=10: under the received GMM', \
     'chain-drift.dat' index 0 using 1:5:6 with yerrorlines lw 2 pt 5 dt 3 title 'FedPFT diag K=10: under the GMM it sent'
