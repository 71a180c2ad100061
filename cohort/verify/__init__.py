"""Verification: checksums and guard bands, the random-kernel fuzzer, the differential runner."""
