// What libjaxsolve_sparse*.so export: the functions marked here, nothing else
// (the libraries are built with -fvisibility=hidden).
#ifndef JAXSOLVE_SPARSE_CSRC_EXPORT_H_
#define JAXSOLVE_SPARSE_CSRC_EXPORT_H_

#define JAXSOLVE_SPARSE_EXPORT \
  extern "C" __attribute__((visibility("default")))

#endif  // JAXSOLVE_SPARSE_CSRC_EXPORT_H_
