"""New definitions written next to lookalikes are insertions (issue 11, "never lose a
line"), in the languages the Python/JavaScript definition rule did not read; and a
segment that the merge finds unchanged between markers is refused, not served."""

from __future__ import annotations

import pytest

from fastapply.merge import apply_snippet

# Reduced from CLIUtils/CLI11 tests/AppTest.cpp (validation set): a new test that shares
# most of its lines with the test before it. Read as a rewrite of RangeDouble, the merge
# dropped that test and returned the file unflagged.
GTEST = """\
TEST_F(TApp, RangeInt) {
    int x{0};
    app.add_option("--one", x)->check(CLI::Range(3, 6));
    run();
}

TEST_F(TApp, RangeDouble) {

    double x{0.0};
    /// Note that this must be a double in Range, too
    app.add_option("--one", x)->check(CLI::Range(3.0, 6.0));

    args = {"--one=1"};
    EXPECT_THROW(run(), CLI::ValidationError);

    args = {"--one=7"};
    EXPECT_THROW(run(), CLI::ValidationError);

    args = {"--one=3"};
    run();
}

// Check to make sure programmatic access to left over is available
TEST_F(TApp, AllowExtras) {

    app.allow_extras();
}
"""

TYPECHECK = """\
TEST_F(TApp, typeCheck) {

    /// Note that this must be a double in Range, too
    app.add_option("--one")->check(CLI::TypeValidator<unsigned int>());

    args = {"--one=1"};
    EXPECT_NO_THROW(run());

    args = {"--one=-7"};
    EXPECT_THROW(run(), CLI::ValidationError);
}

"""

JAVA = """\
public class BufferTest {
  @Test public void readByte() throws Exception {
    Buffer buffer = new Buffer();
    buffer.writeUtf8("ab");
    assertEquals('a', buffer.readByte());
    assertEquals(1, buffer.size());
  }

  @Test public void readShort() throws Exception {
    Buffer buffer = new Buffer();
    buffer.writeUtf8("abcd");
    assertEquals(0x6162, buffer.readShort());
    assertEquals(2, buffer.size());
  }

  @Test public void close() throws Exception {
    new Buffer().close();
  }
}
"""

READINT = """\
  @Test public void readInt() throws Exception {
    Buffer buffer = new Buffer();
    buffer.writeUtf8("abcdefgh");
    assertEquals(0x61626364, buffer.readInt());
    assertEquals(4, buffer.size());
  }

"""


@pytest.mark.parametrize("original,before,block,after", [
    (GTEST, "    run();\n}\n\n", TYPECHECK,
     "// Check to make sure programmatic access to left over is available\n"
     "TEST_F(TApp, AllowExtras) {\n\n"),
    (JAVA, "    assertEquals(2, buffer.size());\n  }\n\n", READINT,
     "  @Test public void close() throws Exception {\n")], ids=["gtest", "java"])
def test_a_new_definition_beside_a_lookalike_is_inserted_not_a_rewrite(
        original: str, before: str, block: str, after: str) -> None:
    # Two readings fit the snippet's lines: the new test inserted after the lookalike
    # (the truth), or the lookalike rewritten into it, its unshown lines dropped. A
    # definition the snippet never names is not removed.
    got = apply_snippet(original, f"// ...\n{before}{block}{after}// ...\n")
    assert got.check() == original.replace(after, block + after, 1)


RUST = """\
fn parse(x: &str) -> u32 {
    x.parse().unwrap()
}

fn helper(x: u32) -> u32 {
    x + 1
}

fn main() {
    let v = parse("1");
    println!("{}", v);
}
"""


def test_a_segment_found_unchanged_between_markers_is_refused() -> None:
    # The snippet deletes helper() (shown by making "}" and "fn main() {" neighbours)
    # and edits main. helper is a definition it never names, so the merge keeps it and
    # finds the first segment as it stands: the deletion was not read. Served before.
    snippet = ("// ... existing code ...\n}\n\nfn main() {\n// ... existing code ...\n"
               "    println!(\"{}\", v + 1);\n}\n")
    got = apply_snippet(RUST, snippet)
    assert got.text != RUST.replace("fn helper(x: u32) -> u32 {\n    x + 1\n}\n\n", "") \
        .replace("v);", "v + 1);")
    assert any("was not read" in u.message for u in got.uncertain), got.uncertain
    with pytest.raises(ValueError, match="was not read"):
        got.check()


# Reduced from jhy/jsoup@42da86439d FuzzFixesTest.java (validation split, a whole-file
# reading in the agent "named" style): a new test at the end of the class, shown after a
# marker with only generic lines (`}`, blank, `@Test`, lines every test repeats) to anchor
# it. Placed after the second-to-last test, it replaced the last one (a typed Java method
# header, which the definition check did not read) and was served as certain.
FUZZ = "".join(f"""
    @Test
    public void {name}() throws IOException {{
        File in = ParseTest.getFile("/fuzztests/{issue}.html.gz");
        Document doc = Jsoup.parse(in, "UTF-8");
        assertNotNull(doc);
    }}
""" for name, issue in (("overflow1607", 1607), ("oob", 1611)))
JAVA = "public class FuzzFixesTest {" + FUZZ + "}\n"


def test_a_typed_java_method_replaced_by_a_new_one_is_not_certain() -> None:
    new = """
    @Test
    public void unconsume() throws IOException {
        File in = ParseTest.getFile("/fuzztests/1612.html.gz");
        Document doc = Jsoup.parse(in, "UTF-8");
        assertNotNull(doc);
    }
"""
    snippet = "    // ... existing code above ...\n    }\n" + new + "}\n"
    got = apply_snippet(JAVA, snippet)
    if got.text != JAVA.replace(FUZZ, FUZZ + new):
        assert got.uncertain, got.text
