import Foundation

/// Milliseconds of `CLOCK_MONOTONIC`: for deadlines and refill rates, which must not
/// jump with the wall clock.
enum MonotonicClock {
    static func milliseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }
}
