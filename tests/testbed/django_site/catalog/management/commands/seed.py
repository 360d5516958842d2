"""``manage.py seed``: the test bed's fixed data and its staff account (username and password given)."""
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from catalog.models import Book, Shelf

SHELVES = [("Atlas", "Map room"), ("Harbour", "East wing"), ("Lighthouse", "Reading room")]
BOOKS = [
    ("A Field Guide to Tide Pools", "Harbour", "978-0-00-000001-1", 3),
    ("Charts of the Northern Fjords", "Atlas", "978-0-00-000002-8", 1),
    ("Keeping the Light", "Lighthouse", "978-0-00-000003-5", 2),
    ("Knots for Small Boats", "Harbour", "978-0-00-000004-2", 4),
    ("Old Roads of the Coast", "Atlas", "978-0-00-000005-9", 2),
    ("The Keeper's Logbook", "Lighthouse", "978-0-00-000006-6", 1),
    ("Winter Storms, 1900-1950", "Lighthouse", "978-0-00-000007-3", 5),
]


class Command(BaseCommand):
    help = "Create the test bed's shelves, books and staff account."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("password")

    def handle(self, *args, username, password, **options):
        shelves = {name: Shelf.objects.create(name=name, room=room) for name, room in SHELVES}
        for title, shelf, isbn, copies in BOOKS:
            Book.objects.create(title=title, shelf=shelves[shelf], isbn=isbn, copies=copies)
        get_user_model().objects.create_superuser(username, "staff@testbed.test", password)
