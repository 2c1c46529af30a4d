"""``python -m reference fetch [SET ...]`` downloads the pinned reference artifacts (all sets by default);
``python -m reference lock [SET ...]`` re-resolves sets with Maven into maven.lock (development only);
``python -m reference classpath SET ...`` prints a set's class path;
``python -m reference peers`` builds franz-go's kgo test binary (Go module proxy) and installs kafkajs (npm) into the
cache."""

from __future__ import annotations

import sys

from reference import go, maven, npm


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("fetch", "lock", "classpath", "peers"):
        print(__doc__, file=sys.stderr)
        return 2
    command, sets = argv[0], argv[1:] or None
    if command == "fetch":
        try:
            n = maven.fetch(sets)
        except (RuntimeError, KeyError) as e:
            print(f"reference fetch failed: {e}", file=sys.stderr)
            return 1
        print(f"reference artifacts ready in {maven.cache_dir()} ({n} downloaded)")
    elif command == "peers":
        try:
            go.build_kgo_tests()
            npm.install()
        except (RuntimeError, maven.ReferenceMissing) as e:
            print(f"reference peers failed: {e}", file=sys.stderr)
            return 1
        print(f"franz-go's kgo tests and the npm packages ready in {maven.cache_dir()}")
    elif command == "lock":
        maven.lock(sets)
    else:
        try:
            print(maven.classpath(*(sets or [])))
        except maven.ReferenceMissing as e:
            print(e, file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
