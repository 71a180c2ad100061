"""The suite passes on any x86-64 width (AVX2 or AVX-512) and on AArch64: a test that looks at
register widths in IR or assembly either derives them from a Target (the host's, or one of
conftest.WIDTH_TARGETS cross-compiled on every host) or is listed below with the reason it is
width-free. A test that spelt one host's width (`v8f32`, `<8 x float>`, `%ymm`) without asking a
target passed on the machine it was written on and failed on the other width."""
import ast
import pathlib
import re

TESTS = pathlib.Path(__file__).parent

# vector types and registers whose width is some machine's register width
WIDTH_LITERAL = re.compile(r"\bv(4|8|16|32)(f32|i32|i1)\b|<(4|8|16|32) x (float|i32|i1)>|%[xyz]mm\d*\b|\bvector_bits\s*==")
# a test that mentions one of these takes its widths from a target, not from a guess
ASKS_A_TARGET = re.compile(r"\bwidth_target\b|\bfrom_triple\(|\bhost\(\)|\bcurrent\(\)|\bcross_compile\(")
# width literals that are not a host's width, by test
WIDTH_FREE = {
    # hand-written IR through a pass that never reads the target (the literals are the input's types)
    ("test_gather_index.py", "test_only_vector_zext_nneg_of_i32_becomes_sext"),
    # 4 lanes asked for explicitly: an IR-level <4 x float> whatever the registers are
    ("test_lowering.py", "test_whole_is_the_width_one_case"),
}


def width_bound_tests():
    found = []
    for path in sorted(TESTS.glob("test_*.py")):
        if path.name == pathlib.Path(__file__).name:
            continue
        text = path.read_text()
        if not WIDTH_LITERAL.search(text):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                src = ast.get_source_segment(text, node) or ""
                if WIDTH_LITERAL.search(src) and not ASKS_A_TARGET.search(src):
                    found.append((path.name, node.name))
    return found


def test_no_test_assumes_one_hosts_vector_width():
    bound = [t for t in width_bound_tests() if t not in WIDTH_FREE]
    assert not bound, ("these tests spell a vector width without asking a Target (use the width_target "
                       f"fixture and cross_compile, or derive it from target.host()): {bound}")


def test_the_exemptions_are_still_needed():
    """An exemption whose test no longer spells a width (renamed or rewritten) is removed."""
    assert set(width_bound_tests()) >= WIDTH_FREE, set(WIDTH_FREE) - set(width_bound_tests())


def test_the_lint_sees_a_width_bound_test(tmp_path):
    """The checker itself: a test spelling v8f32 with no target is found; asking width_target clears it."""
    global TESTS
    (tmp_path / "test_planted.py").write_text(
        "def test_bound():\n    assert 'llvm.masked.store.v8f32' in ir\n\n"
        "def test_portable(width_target):\n    assert f'v{width_target.vector_bits // 32}f32' in ir\n"
        "    assert '<8 x float>' in ir\n")
    saved, TESTS = TESTS, tmp_path
    try:
        assert width_bound_tests() == [("test_planted.py", "test_bound")]
    finally:
        TESTS = saved
