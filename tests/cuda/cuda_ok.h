/*
 * tests/cuda/cuda_ok.h - CUDA_OK(call): a CUDA runtime call in a test
 * program that must succeed; otherwise the file, line, call and the
 * runtime's error string go to stderr and the program exits 1. C and C++.
 */
#ifndef FMOE_TESTS_CUDA_CUDA_OK_H
#define FMOE_TESTS_CUDA_CUDA_OK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CUDA_OK(call) \
    do { \
        cudaError_t e_ = (call); \
        if (e_ != cudaSuccess) { \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1); \
        } \
    } while (0)

#endif
