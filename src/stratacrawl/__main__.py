from stratacrawl.cli import app

app(prog_name="stratacrawl")
