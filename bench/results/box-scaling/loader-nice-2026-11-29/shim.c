/* experiment: PMPI shim recording entry/exit of large MPI_Allreduce calls (CLOCK_MONOTONIC) */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#define CAP 100000
static double ent[CAP], ext[CAP]; static int nrec; static long tid[CAP]; static int cnt[CAP];
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec*1e-3;}
int MPI_Allreduce(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm){
  int sz; PMPI_Type_size(dt,&sz);
  if ((long)count*sz < 100000) return PMPI_Allreduce(s,r,count,dt,op,comm);
  double a=now(); int rc=PMPI_Allreduce(s,r,count,dt,op,comm); double b=now();
  if(nrec<CAP){ent[nrec]=a;ext[nrec]=b;tid[nrec]=syscall(SYS_gettid);cnt[nrec]=count*sz;nrec++;}
  return rc;}
int MPI_Finalize(void){
  int rank; PMPI_Comm_rank(MPI_COMM_WORLD,&rank);
  char fn[256]; snprintf(fn,sizeof fn,"%s/ar-%d.txt",getenv("SHIM_DIR")?getenv("SHIM_DIR"):"/tmp/exp",rank);
  FILE*f=fopen(fn,"w"); if(f){for(int i=0;i<nrec;i++)fprintf(f,"%d %.1f %.1f %ld %d\n",i,ent[i],ext[i],tid[i],cnt[i]);fclose(f);}
  return PMPI_Finalize();}
