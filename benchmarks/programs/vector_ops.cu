// A plain CUDA C program that profkit never saw (no NVTX): per iteration a DRAM-bound SAXPY over
// 64 M floats, ten tiny adds of 1,024 floats (launch-bound), a block reduction, and a 1024^3
// shared-memory tiled SGEMM. Built with nvcc by benchmarks/gpu/capture_programs.sh:
//     nvcc -O2 -arch=sm_90 -o vector_ops vector_ops.cu && ./vector_ops [ITERS] [PROFILE_ITER]
// PROFILE_ITER >= 0 calls cudaProfilerStart/Stop around that iteration only.
#include <cstdio>
#include <cstdlib>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void fill(float *x, int n, float v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v + (i % 7) * 0.25f;
}

__global__ void saxpy(int n, float a, const float *x, float *y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = a * x[i] + y[i];
}

__global__ void add_small(int n, const float *a, float *b) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] += a[i];
}

__global__ void reduce_sum(int n, const float *x, float *out) {
    __shared__ float s[256];
    float v = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += x[i];
    s[threadIdx.x] = v;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, s[0]);
}

#define T 32
__global__ void sgemm_tiled(int n, const float *A, const float *B, float *C) {
    __shared__ float As[T][T], Bs[T][T];
    int r = blockIdx.y * T + threadIdx.y, c = blockIdx.x * T + threadIdx.x;
    float acc = 0.f;
    for (int k0 = 0; k0 < n; k0 += T) {
        As[threadIdx.y][threadIdx.x] = A[r * n + k0 + threadIdx.x];
        Bs[threadIdx.y][threadIdx.x] = B[(k0 + threadIdx.y) * n + c];
        __syncthreads();
        for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    C[r * n + c] = acc;
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 50, profile_iter = argc > 2 ? atoi(argv[2]) : -1;
    const int n = 64 << 20, small = 1024, m = 1024;
    float *x, *y, *a, *b, *A, *B, *C, *sum;
    CHECK(cudaMalloc(&x, n * sizeof(float)));
    CHECK(cudaMalloc(&y, n * sizeof(float)));
    CHECK(cudaMalloc(&a, small * sizeof(float)));
    CHECK(cudaMalloc(&b, small * sizeof(float)));
    CHECK(cudaMalloc(&A, m * m * sizeof(float)));
    CHECK(cudaMalloc(&B, m * m * sizeof(float)));
    CHECK(cudaMalloc(&C, m * m * sizeof(float)));
    CHECK(cudaMalloc(&sum, sizeof(float)));
    fill<<<(n + 255) / 256, 256>>>(x, n, 1.f);
    fill<<<(n + 255) / 256, 256>>>(y, n, 2.f);
    fill<<<(small + 255) / 256, 256>>>(a, small, 0.5f);
    fill<<<(small + 255) / 256, 256>>>(b, small, 0.f);
    fill<<<(m * m + 255) / 256, 256>>>(A, m * m, 0.01f);
    fill<<<(m * m + 255) / 256, 256>>>(B, m * m, 0.02f);
    CHECK(cudaGetLastError());
    for (int it = 0; it < iters; ++it) {
        if (it == profile_iter) { CHECK(cudaDeviceSynchronize()); cudaProfilerStart(); }
        saxpy<<<132 * 8, 256>>>(n, 1.0001f, x, y);
        for (int j = 0; j < 10; ++j) add_small<<<(small + 255) / 256, 256>>>(small, a, b);
        CHECK(cudaMemset(sum, 0, sizeof(float)));
        reduce_sum<<<132 * 4, 256>>>(n, y, sum);
        sgemm_tiled<<<dim3(m / T, m / T), dim3(T, T)>>>(m, A, B, C);
        if (it == profile_iter) { CHECK(cudaDeviceSynchronize()); cudaProfilerStop(); }
    }
    CHECK(cudaGetLastError());
    float h = 0.f;
    CHECK(cudaMemcpy(&h, sum, sizeof(float), cudaMemcpyDeviceToHost));
    printf("vector_ops: %d iterations, sum %.4g\n", iters, h);
    return 0;
}
