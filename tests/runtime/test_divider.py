"""``cpufree::Divider`` (runtime.cuh): quotient and remainder by a divisor prepared once, checked against ``/`` and
``%`` on the host (the emulation build compiles the same code as the device, with a portable multiply-high), and
compiled for a GPU by nvcc."""

import shutil
import subprocess

import pytest

from dace_cpufree.runtime import find_nvcc
from dace_cpufree.runtime.build import INCLUDE_DIR

# Every d in 1..5000 and random d up to 2^40, each against n at the edges of its own range (0, d - 1, d,
# multiples and their neighbours), of 32 bits (2^31 - 1, 2^32 - 1, 2^32) and large, plus random n below 2^32
# and below 2^62. d = 0 is built (it must not trap) but never divided by.
CHECK = r"""
#include <cpufree/runtime.cuh>
#include <cstdio>
#include <random>
#include <vector>

static long long failures = 0, checked = 0;

static void check(long long d, long long n) {
    const cpufree::Divider div(d);
    const cpufree::DivMod got = div.divmod(n, d);
    ++checked;
    if (got.quot != n / d || got.rem != n % d) {
        if (failures++ < 10)
            std::printf("d=%lld n=%lld: %lld %lld, expected %lld %lld\n", d, n, got.quot, got.rem, n / d, n % d);
    }
}

static void edges(long long d, std::mt19937_64 &rng) {
    std::vector<long long> ns = {0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, (1ll << 31) - 1, 1ll << 31,
                                 (1ll << 32) - 1, 1ll << 32, (1ll << 32) + 1, (1ll << 40) + 7, (1ll << 62) - 1,
                                 0x7fffffffffffffffll};
    const long long top = (1ll << 32) - 1;  // multiples of d around the end of the 32-bit range
    ns.push_back(top / d * d);
    ns.push_back(top / d * d - 1);
    if (top / d * d + d - 1 > top) ns.push_back(top / d * d + d - 1);
    for (long long k = 1; k <= 64; ++k) {
        ns.push_back(k * d);
        ns.push_back(k * d - 1);
        ns.push_back(k * d + 1);
    }
    for (int k = 0; k < 200; ++k) {
        ns.push_back((long long)(rng() & 0xffffffffull));
        ns.push_back((long long)(rng() >> 2));
    }
    for (long long n : ns)
        if (n >= 0) check(d, n);
}

int main() {
    std::mt19937_64 rng(12345);
    const cpufree::Divider zero(0);  // built for an empty map: no trap
    (void)zero;
    for (long long d = 1; d <= 5000; ++d) edges(d, rng);
    for (long long d : {(1ll << 31) - 1, 1ll << 31, (1ll << 31) + 1, (1ll << 32) - 1, 1ll << 32, (1ll << 32) + 1,
                        (1ll << 40)})
        edges(d, rng);
    for (int k = 0; k < 20000; ++k) edges(1 + (long long)(rng() % (1ull << 40)), rng);
    for (int k = 0; k < 20000; ++k) edges(1 + (long long)(rng() % (1ull << 32)), rng);
    // every n below 2^20 for a few divisors: a dense sweep of the fast path
    for (long long d : {3ll, 7ll, 641ll, 4095ll, 4097ll, 65537ll, 1000003ll})
        for (long long n = 0; n < (1 << 20); ++n) check(d, n);
    std::printf("%lld %lld\n", checked, failures);
    return failures != 0;
}
"""

DEVICE = r"""
#include <cpufree/runtime.cuh>
__global__ void decode(long long n, long long e, long long *out) {
    const cpufree::Divider div(cpufree::max_<long long>(0, e - 2));
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long f = (long long)blockIdx.x * blockDim.x + threadIdx.x; f < n; f += step) {
        const cpufree::DivMod qr = div.divmod(f, cpufree::max_<long long>(0, e - 2));
        out[f] = qr.quot * 3 + qr.rem;
    }
}
"""


def test_divider_matches_division(tmp_path):
    cxx = shutil.which("g++") or pytest.skip("no g++")
    src, exe = tmp_path / "divider.cpp", tmp_path / "divider"
    src.write_text(CHECK)
    subprocess.run(
        [cxx, "-std=c++17", "-O2", "-DCPUFREE_EMULATE", f"-I{INCLUDE_DIR}", str(src), "-o", str(exe)],
        check=True,
        capture_output=True,
    )
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300).stdout
    checked, failures = (int(v) for v in out.split()[-2:])
    assert failures == 0, out
    assert checked > 10_000_000


@pytest.mark.compile
def test_divider_compiles_for_the_device(tmp_path):
    src = tmp_path / "divider.cu"
    src.write_text(DEVICE)
    nvcc = find_nvcc() or "nvcc"
    cmd = [nvcc, "-std=c++17", "-arch=sm_90", f"-I{INCLUDE_DIR}", "-c", str(src), "-o", str(tmp_path / "d.o")]
    subprocess.run(cmd, check=True, capture_output=True)
