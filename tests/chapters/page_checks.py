"""What a reader would trip over in a chapter's source: shared by the page tests of chapters 05
and 13 (a helper, not a test module)."""

import re

import nbformat


def page_problems(path):
    """What a reader would trip over in one chapter's source (issue 11, 18.1, 18.4)."""
    nb = nbformat.read(path, as_version=4)
    problems, used, glued = [], set(), set()
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            used |= set(re.findall(r"\{glue(?::\w+)?\}`(\w+)", cell.source))
            prose = re.sub(r"```.*?```|`[^`]*`|\$\$.*?\$\$|\$[^$]*\$", "", cell.source, flags=re.S)
            for token in re.findall(r"<(?:s|pad|eos|bos|unk)>", prose):
                problems.append(f"cell {i}: unescaped {token} (write it in backticks)")
        elif "setup" not in cell.metadata.get("tags", []):
            glued |= set(re.findall(r'glue\(\s*"(\w+)"', cell.source))
            problems += [
                f"cell {i}: code line of {len(line)} > 80 characters"
                for line in cell.source.splitlines()
                if len(line) > 80
            ]
    problems += [f"{{glue}} `{name}` is never glued" for name in sorted(used - glued)]
    return problems
