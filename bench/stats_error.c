/* stats_error: how far a node's exact statistics (its bundle.pftb, first part) are from the centralized
 * statistics of every node's l2-normalised training rows (DIR/<prefix><NN>/data/train_{x,y}.npy).
 * With ALPHA, also the accuracy on DIR/eval_{x,y}.npy of the LDA head of the centralized statistics at that
 * shrinkage (the node's, from its result.json): a node holding the centralized statistics has that accuracy.
 * Usage: stats_error RUN_DIR NODE N_NODES PREFIX [ALPHA]   (built and run by bench/exact_chain.sh)
 * PREFIX "-" takes node ids n00, n01, ... as PREFIX + two digits; "=" takes the ids from DIR/ids.txt. */
#include "pft_bundle.h"
#include "pft_ghead.h"
#include "pft_gstat.h"
#include "pft_npy.h"
#include "pft_prep.h"
#include "pft_fsio.h"
#include "pft_alloc.h"
#include "pft_error.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static double rel(const double *a, const double *b, size_t n){double u=0,v=0;for(size_t i=0;i<n;i++){u+=(a[i]-b[i])*(a[i]-b[i]);v+=b[i]*b[i];}return sqrt(u/v);}
int main(int argc,char**argv){
  const char*dir=argv[1],*sink=argv[2];int nn=atoi(argv[3]);const char*pre=argv[4];
  char p[512]; snprintf(p,sizeof p,"%s/%s/bundle.pftb",dir,sink);
  uint8_t*buf;size_t len; if(pft_fsio_read(p,1<<28,&buf,&len)){printf("read fail\n");return 1;}
  pft_bundle_t*b; if(pft_bundle_decode(buf,len,NULL,&b)){printf("decode: %s\n",pft_errmsg());return 1;}
  const pft_gstat_t*s=pft_bundle_part_stats(b,0); int d=pft_gstat_dim(s);
  pft_gstat_t*c=pft_gstat_new(PFT_GSTAT_TIED,d);
  char ids[4096][72]; int nid=0;
  if(strcmp(pre,"=")==0){char ip[512];snprintf(ip,512,"%s/ids.txt",dir);FILE*f=fopen(ip,"r");while(f&&nid<4096&&fscanf(f,"%71s",ids[nid])==1)nid++;if(f)fclose(f);nn=nid;}
  else for(int i=0;i<nn&&i<4096;i++)snprintf(ids[i],72,"%s%02d",pre,i);
  for(int i=0;i<nn;i++){char px[512],py[512];snprintf(px,512,"%s/%s/data/train_x.npy",dir,ids[i]);snprintf(py,512,"%s/%s/data/train_y.npy",dir,ids[i]);
    float*x;int32_t*y;int64_t n,dd,ny; if(pft_npy_read_f32(px,&x,&n,&dd)||pft_npy_read_i32(py,&y,&ny)){printf("cannot read %s\n",px);return 1;}
    pft_prep_apply(PFT_PREP_L2,x,(int)n,(int)dd);pft_gstat_add_rows(c,x,y,(size_t)n);pft_free(x);pft_free(y);}
  double wm=0; for(int k=0;k<pft_gstat_n_classes(c);k++){ if(pft_gstat_count(s,k)!=pft_gstat_count(c,k))printf("count mismatch\n"); double e=rel(pft_gstat_mean(s,k),pft_gstat_mean(c,k),d); if(e>wm)wm=e;}
  printf("rows %llu  worst class-mean relative error %.3g  shared-scatter relative error %.3g\n",(unsigned long long)pft_gstat_total(s),wm,rel(pft_gstat_tied_scatter(s),pft_gstat_tied_scatter(c),(size_t)d*d));
  if(argc>5){double alpha=atof(argv[5]);char px[512],py[512];snprintf(px,512,"%s/eval_x.npy",dir);snprintf(py,512,"%s/eval_y.npy",dir);
    float*x;int32_t*y;int64_t n,dd,ny; if(pft_npy_read_f32(px,&x,&n,&dd)||pft_npy_read_i32(py,&y,&ny)){printf("cannot read %s\n",px);return 1;}
    pft_prep_apply(PFT_PREP_L2,x,(int)n,(int)dd); int C=0; for(int64_t i=0;i<n;i++) if(y[i]+1>C) C=y[i]+1;
    for(int k=0;k<pft_gstat_n_classes(c);k++) if(pft_gstat_label(c,k)+1>C) C=pft_gstat_label(c,k)+1;
    pft_ghead_opts_t o; pft_ghead_opts_default(&o); o.alpha=alpha; pft_ghead_t*h; double acc;
    if(pft_ghead_fit(c,NULL,NULL,0,C,&o,&h,NULL)||pft_ghead_accuracy(h,x,y,(int)n,&acc,NULL,NULL)){printf("head: %s\n",pft_errmsg());return 1;}
    printf("centralized LDA head at shrinkage %g: accuracy %.6f on %lld eval rows\n",alpha,acc,(long long)n);}
  return 0;}
