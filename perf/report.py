"""The one way perf/ scripts hand back a result: the table printed, and
written as OUT.md beside the numbers as OUT.json."""
import json
import os


def write_report(out, lines, data):
    """Print the report's lines and write OUT.md (them) and OUT.json (data)."""
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".md", "w") as f:
        f.write(text)
    with open(out + ".json", "w") as f:
        json.dump(data, f, indent=1)
