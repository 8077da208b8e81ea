"""Language by file extension, and the comment markers an LLM writes in each language."""

from __future__ import annotations

from pathlib import PurePosixPath

#: file extension (lower case, with the dot) or whole file name -> language
EXTENSIONS: dict[str, str] = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "typescript",
    ".go": "go", ".rs": "rust", ".rb": "ruby", ".rake": "ruby", ".gemspec": "ruby",
    ".java": "java", ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp",
    ".cs": "csharp", ".php": "php", ".kt": "kotlin", ".kts": "kotlin", ".swift": "swift",
    ".yml": "yaml", ".yaml": "yaml", ".json": "json", ".md": "markdown",
    ".html": "html", ".htm": "html", ".vue": "vue",
    ".sh": "shell", ".bash": "shell", ".bats": "shell", ".zsh": "shell",
    ".css": "css", ".scss": "scss", ".sql": "sql", ".lua": "lua", ".hs": "haskell",
    ".toml": "toml", ".xml": "xml",
    "Gemfile": "ruby", "Rakefile": "ruby", "Makefile": "make", "Dockerfile": "dockerfile",
}

HASH = ("# {}",)
SLASH = ("// {}", "/* {} */")
MARKUP = ("<!-- {} -->",)
DASH = ("-- {}",)

#: language -> comment templates for a marker, most usual first ("{}" takes the wording)
COMMENTS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("python", "ruby", "shell", "yaml", "toml", "make", "dockerfile"), HASH),
    **dict.fromkeys(("javascript", "typescript", "go", "rust", "java", "c", "cpp", "csharp",
                     "kotlin", "swift", "scss"), SLASH),
    "php": ("// {}", "/* {} */", "# {}"),
    "css": ("/* {} */",),
    **dict.fromkeys(("html", "xml", "markdown"), MARKUP),
    "vue": ("<!-- {} -->", "// {}"),
    **dict.fromkeys(("sql", "lua", "haskell"), DASH),
    "json": ("// {}",),
}

#: what LLMs write inside a marker (the bare form "..." is added separately)
WORDINGS = (
    "... existing code ...", "...", "... rest of code ...", "... keep existing code ...",
    "... existing code remains the same ...", "... unchanged ...", "... code unchanged ...",
    "... rest of the file unchanged ...", "... (existing code) ...", "... other code ...",
)


def language_of(path: str) -> str | None:
    """The language of ``path`` by its extension or name; None when not covered.

    >>> language_of("src/main/java/Foo.java"), language_of("a/Gemfile"), language_of("x.bin")
    ('java', 'ruby', None)
    """
    p = PurePosixPath(path)
    return EXTENSIONS.get(p.name) or EXTENSIONS.get(p.suffix.lower())
