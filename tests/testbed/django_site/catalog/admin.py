from django.contrib import admin

from .models import Book, Shelf


@admin.register(Shelf)
class ShelfAdmin(admin.ModelAdmin):
    list_display = ["name", "room"]


@admin.register(Book)
class BookAdmin(admin.ModelAdmin):
    list_display = ["title", "shelf", "isbn", "copies"]
    list_filter = ["shelf"]
    search_fields = ["title", "isbn"]
