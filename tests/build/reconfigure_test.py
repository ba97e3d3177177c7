#!/usr/bin/env python3
"""One build directory configured with the CUDA backend, then without it, then with it again.

scripts/test.sh configures ./build with CUDA where nvcc is; scripts/demo.sh reconfigures the same
directory without it. A find_library result cached by the first (NCCL_LIBRARY) once made the
second fail at generation ("Target trident_comm links to CUDA::cudart but the target was not
found"). Configures only (no compiling), in a scratch directory.

Usage: reconfigure_test.py CMAKE SOURCE_DIR   (registered where this build has the CUDA backend)
"""
import subprocess
import sys
import tempfile


def main():
    cmake, source = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="trident_reconfigure_") as build:
        common = [cmake, "-S", source, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                  "-DTRIDENT_BUILD_TESTS=OFF", "-DTRIDENT_BUILD_BENCH=OFF", "-DCMAKE_CUDA_ARCHITECTURES=90"]
        for cuda in ("ON", "OFF", "ON"):
            r = subprocess.run(common + [f"-DTRIDENT_CUDA={cuda}"], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL: configuring with TRIDENT_CUDA={cuda} after the previous configure:\n"
                      f"{r.stdout[-1500:]}\n{r.stderr[-1500:]}")
                return 1
            want = f"trident: CUDA backend {cuda}"
            if want not in r.stdout:
                print(f"FAIL: expected '{want}' in cmake's output:\n{r.stdout[-1500:]}")
                return 1
            nccl = [l for l in r.stdout.splitlines() if "trident: NCCL" in l]
            if cuda == "OFF" and nccl and nccl[0].strip() != "-- trident: NCCL":
                print(f"FAIL: without CUDA the build should use no NCCL, cmake said: {nccl[0]}")
                return 1
    print("reconfigure_test: CUDA on, off and on again in one build directory: every configure passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
