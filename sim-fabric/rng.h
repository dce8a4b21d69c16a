// Seeded pseudo-random numbers for the emulator.
//
// SplitMix64 seeds a xoshiro256** generator; both are tiny, fast and fully
// reproducible across platforms, so a scenario run with the same seed yields
// byte-identical results. Each Fabric owns its own generator (no global state).
// Thread-compatible: one instance per thread.
#ifndef LOOM_SIM_FABRIC_RNG_H_
#define LOOM_SIM_FABRIC_RNG_H_

#include <cstdint>

namespace loom::sim {

// One SplitMix64 step: a good 64-bit mixer, also used as a hash finalizer.
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Combines a value into a running hash.
inline uint64_t HashCombine(uint64_t h, uint64_t v) { return SplitMix64(h ^ SplitMix64(v)); }

class Rng {
 public:
  explicit Rng(uint64_t seed = 1) { Seed(seed); }
  void Seed(uint64_t seed) {
    uint64_t x = seed;
    for (auto& w : s_) {
      x += 0x9e3779b97f4a7c15ULL;
      w = SplitMix64(x);
    }
  }
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform in [0, n).
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_RNG_H_
