"""llvmlite backend: lowering (whole and packet), JIT, compile cache, launch API, native timer."""
