"""`python -m ripple`: the `ripple` command; also the file `spark-submit` runs to start the
pipeline's driver inside a cluster (docs/deploy-spark.md)."""

from ripple.cli import main

if __name__ == "__main__":
    main()
