# written by pftnet report; to restyle, edit and rerun in this folder: gnuplot gmm-family-synth.gp
set terminal svg size 860,520 dynamic noenhanced font 'Sans,12' background rgb 'white'
set output 'gmm-family-synth.svg'
set title 'gmm-family: accuracy of a head on what was sent vs bundle size'
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
set xrange [7265.2:6.89745e+08]
set yrange [62:89]
set format x '%.0s %cB'
set mxtics 10
set xtics (10000, 100000, 1e+06, 1e+07, 1e+08)
set xlabel 'bundle bytes (all classes, log scale)'
set ylabel 'accuracy (%)'
raw = 84.6847
plot 'gmm-family-synth.dat' index 0 using 1:2:3 with yerrorlines lw 2 pt 7 title 'diag', \
     'gmm-family-synth.dat' index 1 using 1:2:3 with yerrorlines lw 2 pt 7 title 'diag + gaussian head (LDA)', \
     'gmm-family-synth.dat' index 2 using 1:2:3 with yerrorlines lw 2 pt 7 title 'full', \
     'gmm-family-synth.dat' index 3 using 1:2:3 with yerrorlines lw 2 pt 7 title 'full + gaussian head (QDA)', \
     'gmm-family-synth.dat' index 4 using 1:2:3 with yerrorlines lw 2 pt 7 title 'spher', \
     'gmm-family-synth.dat' index 5 using 1:2:3 with yerrorlines lw 2 pt 7 title 'tied + gaussian head (LDA)', \
     'gmm-family-synth.dat' index 6 using 1:2:3 with labels left font ',10' notitle, \
     raw with lines dt 2 lw 2 lc rgb '#333333' title 'head on raw features'
