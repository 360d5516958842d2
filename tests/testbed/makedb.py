"""The test bed's SQLite database for Datasette, generated deterministically from a seed.

Two tables joined by a foreign key (``books.author_id`` -> ``authors.id``), a low-cardinality
``genre`` column Datasette offers as a facet, numbers to sort by, a few hundred rows in all.
The same seed gives the same rows; the file is written fresh each time.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

GENRES = ["fantasy", "history", "mystery", "poetry", "science", "travel"]
COUNTRIES = ["Chile", "Ghana", "Iceland", "Japan", "Norway", "Peru", "Portugal", "Vietnam"]
FIRST = ["Ada", "Bruno", "Chen", "Dalia", "Emeka", "Freya", "Goran", "Hana", "Ines", "Jonas", "Kofi", "Lena",
         "Marta", "Nils", "Olu", "Priya", "Quinn", "Rosa", "Sami", "Tove"]
LAST = ["Alvarez", "Berg", "Costa", "Dahl", "Eze", "Fujita", "Gomez", "Haugen", "Ito", "Jensen", "Kim", "Lund",
        "Mensah", "Nakamura", "Olsen", "Pereira"]
WORDS = ["Amber", "Bridge", "Cedar", "Delta", "Echo", "Fjord", "Garden", "Harbor", "Island", "Juniper", "Kestrel",
         "Lantern", "Meadow", "North", "Orchard", "Prism", "Quarry", "River", "Silver", "Tide", "Umber", "Valley",
         "Willow", "Yarrow", "Zenith"]

AUTHORS = 40
BOOKS = 300


def make_database(path: str | Path, seed: int = 7) -> Path:
    """Write the database to ``path`` (replacing it) and return the path."""
    path = Path(path)
    path.unlink(missing_ok=True)
    rng = random.Random(seed)
    conn = sqlite3.connect(path)
    try:
        conn.executescript("""
            CREATE TABLE authors (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL);
            CREATE TABLE books (
                id INTEGER PRIMARY KEY, title TEXT NOT NULL,
                author_id INTEGER NOT NULL REFERENCES authors(id),
                genre TEXT NOT NULL, year INTEGER NOT NULL, pages INTEGER NOT NULL, rating REAL NOT NULL);
            CREATE INDEX books_author ON books(author_id);
        """)
        names = set()
        authors = []
        for i in range(1, AUTHORS + 1):
            name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
            while name in names:
                name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
            names.add(name)
            authors.append((i, name, rng.choice(COUNTRIES)))
        conn.executemany("INSERT INTO authors VALUES (?, ?, ?)", authors)
        titles = set()
        books = []
        for i in range(1, BOOKS + 1):
            title = f"The {rng.choice(WORDS)} {rng.choice(WORDS)}"
            while title in titles:
                title = f"The {rng.choice(WORDS)} {rng.choice(WORDS)}"
            titles.add(title)
            books.append((i, title, rng.randint(1, AUTHORS), rng.choice(GENRES), rng.randint(1950, 2024),
                          rng.randint(90, 900), round(rng.uniform(1.0, 5.0), 1)))
        conn.executemany("INSERT INTO books VALUES (?, ?, ?, ?, ?, ?, ?)", books)
        conn.commit()
    finally:
        conn.close()
    return path
