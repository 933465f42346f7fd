"""The documents stay true and stand alone: README.md and docs/*.md.

- The README is an on-ramp: at most 300 lines.
- Every relative link resolves: the file exists in the repository and, for a Markdown file, the
  #anchor names one of its headings (GitHub's slugs).
- Every count a document states of what the template declares is the template's: "N routes",
  "N alarms", "N secrets", "N functions" (or Lambdas), "N tables", and point-in-time recovery
  "(N of the M tables)" — in digits or in words.
- Nothing cites a document outside the repository: no tracked file names the specification
  the project was built from ("SPEC") or the directory beside the repository that holds it.
- The lists that follow the code stay whole: every alarm of the template has its row in
  OPERATIONS' table, every template parameter its row in DEPLOY's; every repository path a
  document names (in backticks, or in ARCHITECTURE's tree) exists; every folder of `examples/`
  is in DEVELOPING's row for it; every secret-bearing variable the code reads
  (`SECRET_VARIABLES`) is in KEYS' list of them.

Run: .local/venv/bin/python -m unittest discover -s infra/tests -v   (make test runs it)
"""

import os
import re
import subprocess
import unittest
from collections import Counter

from moto_process import INFRA  # noqa: F401 - puts infra/ on sys.path

from local_iam.template import load

ROOT = os.path.dirname(os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}
WORDS.update({"twenty-one": 21, "twenty-two": 22, "twenty-three": 23, "twenty-four": 24,
              "twenty-five": 25, "twenty-six": 26, "twenty-seven": 27, "twenty-eight": 28})
NUMBER = r"(\d+|" + "|".join(sorted(WORDS, key=len, reverse=True)) + r")"


def number(text: str) -> int:
    return int(text) if text.isdigit() else WORDS[text.lower()]


def documents() -> list[str]:
    docs = os.path.join(ROOT, "docs")
    return [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces
    to `-`."""
    text = re.sub(r"`|\*|_(?=\W)|(?<=\W)_", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: str) -> set[str]:
    seen: Counter = Counter()
    found = set()
    fenced = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fenced = not fenced
            if fenced or not line.startswith("#"):
                continue
            base = slug(line.lstrip("#"))
            found.add(base if seen[base] == 0 else f"{base}-{seen[base]}")
            seen[base] += 1
    return found


def template_counts() -> dict[str, int]:
    resources = load()["Resources"].values()
    kinds = Counter(r["Type"] for r in resources)
    routes = sum(1 for r in resources if r["Type"] == "AWS::Serverless::Function"
                 for e in (r["Properties"].get("Events") or {}).values() if e["Type"] == "HttpApi")
    recovery = sum(1 for r in resources if r["Type"] == "AWS::DynamoDB::Table"
                   and r["Properties"].get("PointInTimeRecoverySpecification"))
    return {
        "routes": routes,
        "alarms": kinds["AWS::CloudWatch::Alarm"],
        "secrets": kinds["AWS::SecretsManager::Secret"],
        "functions": kinds["AWS::Serverless::Function"],
        "tables": kinds["AWS::DynamoDB::Table"],
        "recovery": recovery,
    }


# What each count is stated as. A subset is never written "N tables" (write "N of the M
# tables"); prose outside a count ("two secrets verify during a rotation") is not matched
# because the noun must follow the number directly (an adjective between is allowed where
# listed).
COUNTED = {
    "routes": NUMBER + r" (?:HTTP )?(?:API )?routes\b",
    "alarms": NUMBER + r" (?:CloudWatch )?alarms\b",
    "secrets": NUMBER + r" (?:Secrets Manager )?secrets\b",
    "functions": NUMBER + r" (?:Rust )?(?:Lambda )?(?:functions|Lambdas)\b",
    "tables": NUMBER + r" (?:DynamoDB )?tables\b",
}


class Documents(unittest.TestCase):
    def test_the_readme_is_an_on_ramp(self) -> None:
        with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
            lines = f.read().splitlines()
        self.assertLessEqual(len(lines), 300, "the README is at most 300 lines")

    def test_every_relative_link_resolves(self) -> None:
        link = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
        for path in documents():
            with open(path, encoding="utf-8") as f:
                text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
            for target in link.findall(text):
                if re.match(r"^[a-z]+:", target):
                    continue
                file_part, _, anchor = target.partition("#")
                resolved = path if not file_part else os.path.normpath(
                    os.path.join(os.path.dirname(path), file_part))
                with self.subTest(document=os.path.relpath(path, ROOT), link=target):
                    self.assertTrue(resolved.startswith(ROOT + os.sep), "outside the repository")
                    self.assertTrue(os.path.exists(resolved), "no such file")
                    if anchor and resolved.endswith(".md"):
                        self.assertIn(anchor, anchors(resolved), "no such heading")

    def test_every_count_a_document_states_is_the_templates(self) -> None:
        counts = template_counts()
        stated = 0
        for path in documents():
            with open(path, encoding="utf-8") as f:
                text = f.read()
            name = os.path.relpath(path, ROOT)
            for what, pattern in COUNTED.items():
                for match in re.finditer(pattern, text, flags=re.I):
                    stated += 1
                    with self.subTest(document=name, stated=match.group(0)):
                        self.assertEqual(number(match.group(1)), counts[what])
            for match in re.finditer(r"\(" + NUMBER + r" of the " + NUMBER + r" tables\)", text):
                stated += 1
                with self.subTest(document=name, stated=match.group(0)):
                    self.assertEqual(number(match.group(1)), counts["recovery"])
                    self.assertEqual(number(match.group(2)), counts["tables"])
        self.assertGreater(stated, 5, "the documents state the template's counts somewhere")

    def test_nothing_cites_a_document_outside_the_repository(self) -> None:
        files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                               check=True).stdout.split()
        # `../shared/src/` is this repository's own library crate, seen from tests/.
        outside = re.compile(r"\bSPEC\b|\.\./shared/(?!src/)|\bNOTES\.md\b|\bSTYLE\.md\b")
        for name in files:
            if name.startswith("tests/fixtures/") or not name.endswith(
                    (".md", ".rs", ".py", ".sh", ".yaml", ".yml", ".json", ".toml", ".txt")):
                continue
            if name == "infra/tests/test_docs.py":
                continue
            with open(os.path.join(ROOT, name), encoding="utf-8", errors="replace") as f:
                for line_number, line in enumerate(f, 1):
                    with self.subTest(file=name, line=line_number):
                        self.assertIsNone(outside.search(line), line.strip())



def read(relative: str) -> str:
    with open(os.path.join(ROOT, relative), encoding="utf-8") as f:
        return f.read()


def table_names(text: str) -> set[str]:
    """Every backticked name in a table row's first cell."""
    names = set()
    for line in text.splitlines():
        if line.startswith("| `"):
            names.update(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return names


# Where a repository path starts: the top-level folders and the root files a document names.
TOP = r"(?:docs|infra|shared|tests|cli|functions|examples|\.ci)/"


class ListsFollowTheCode(unittest.TestCase):
    def test_the_readmes_cost_is_cost_mds(self) -> None:
        readme, cost = read("README.md"), read("docs/COST.md")
        headline = re.search(r"\*\*What it costs\.\*\* (\$[\d.,]+) per million approvals.*?; (\$[\d.,]+) a month",
                             readme, flags=re.S)
        assert headline is not None, "the README states what it costs"
        self.assertIn(f"**per million approvals: {headline.group(1)}**", cost)
        self.assertRegex(cost, r"\*\*total\*\* \|[^|]*\| \*\*" + re.escape(headline.group(2)) + r"\*\*")
        sfn = re.search(r"\*\*(\$[\d.,]+) per million approvals\*\* in transitions alone", cost)
        assert sfn is not None
        self.assertIn(f"{sfn.group(1)} per million approvals", readme, "the README's Step Functions comparison")

    def test_every_alarm_has_its_row_in_operations(self) -> None:
        alarms = {name for name, r in load()["Resources"].items() if r["Type"] == "AWS::CloudWatch::Alarm"}
        self.assertGreater(len(alarms), 10)
        rows = table_names(read("docs/OPERATIONS.md"))
        # A row `<Function>ErrorsAlarm` stands for every function's alarm of that kind.
        kinds = [row.removeprefix("<Function>") for row in rows if row.startswith("<Function>")]
        missing = {a for a in alarms - rows if not any(a.endswith(kind) for kind in kinds)}
        self.assertEqual(missing, set(), "alarms missing from the table")

    def test_every_parameter_has_its_row_in_deploy(self) -> None:
        parameters = set(load()["Parameters"])
        self.assertEqual(parameters - table_names(read("docs/DEPLOY.md")), set(), "parameters missing from the table")

    def test_every_path_a_document_names_exists(self) -> None:
        checked = 0
        for path in documents():
            text = open(path, encoding="utf-8").read()
            named = re.findall(r"`(" + TOP + r"[\w./-]*)`", text)
            # ARCHITECTURE's tree names the library's files relative to shared/.
            if path.endswith("ARCHITECTURE.md"):
                named += ["shared/" + p for p in re.findall(r"^\s+(src/[\w./-]+)", text, flags=re.M)]
            for name in named:
                name = name.split("#")[0].rstrip(".")
                checked += 1
                with self.subTest(document=os.path.relpath(path, ROOT), path=name):
                    self.assertTrue(os.path.exists(os.path.join(ROOT, name)), "no such path")
        self.assertGreater(checked, 50)

    def test_every_examples_folder_is_listed_where_the_examples_are(self) -> None:
        folders = {f for f in os.listdir(os.path.join(ROOT, "examples"))
                   if os.path.isdir(os.path.join(ROOT, "examples", f))}
        row = next(line for line in read("docs/DEVELOPING.md").splitlines() if line.startswith("| `examples/` |"))
        for folder in sorted(folders):
            with self.subTest(folder=folder):
                self.assertIn(f"`{folder}/", row)

    def test_every_secret_bearing_variable_is_listed_in_keys(self) -> None:
        source = read("shared/src/config/secrets.rs")
        listed = re.search(r"pub const SECRET_VARIABLES: \[&str; \d+\] = \[(.*?)\];", source, flags=re.S)
        assert listed is not None
        variables = re.findall(r'"([A-Z_]+)"', listed.group(1))
        self.assertGreater(len(variables), 5)
        keys = read("docs/KEYS.md")
        paragraph = keys[keys.index("The secret-bearing variables are"):].split("\n\n")[0]
        for variable in variables:
            with self.subTest(variable=variable):
                self.assertIn(f"`{variable}`", paragraph)


if __name__ == "__main__":
    unittest.main()
