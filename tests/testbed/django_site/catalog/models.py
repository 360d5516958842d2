"""A small library catalogue: shelves and the books on them."""
from django.db import models


class Shelf(models.Model):
    name = models.CharField(max_length=80, unique=True)
    room = models.CharField(max_length=40)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "shelves"

    def __str__(self):
        return self.name


class Book(models.Model):
    title = models.CharField(max_length=120)
    shelf = models.ForeignKey(Shelf, on_delete=models.CASCADE, related_name="books")
    isbn = models.CharField("ISBN", max_length=20, unique=True)
    copies = models.PositiveIntegerField(default=1)
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["title"]

    def __str__(self):
        return self.title
