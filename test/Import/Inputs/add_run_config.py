"""Copies a .pt2 archive and adds the run configuration loom.capture embeds.

usage: add_run_config.py IN.pt2 OUT.pt2 JSON

JSON is written as the archive's `extra/loom_run.json`, next to its
`models/` folder, as torch.export.save(extra_files=...) stores it. Only the
Python standard library is used, so the tests need no torch.
"""

import sys
import zipfile


def main():
    src, dst, text = sys.argv[1:4]
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        folder = None
        for info in zin.infolist():
            if info.filename.endswith("models/model.json"):
                folder = info.filename[: -len("models/model.json")]
            zout.writestr(info, zin.read(info.filename))
        zout.writestr(folder + "extra/loom_run.json", text)


if __name__ == "__main__":
    main()
