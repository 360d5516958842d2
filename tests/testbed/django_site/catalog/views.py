"""Public pages: the catalogue and one page per book (what a crawl sees without logging in)."""
from django.shortcuts import get_object_or_404, render

from .models import Book


def book_list(request):
    return render(request, "catalog/list.html", {"books": Book.objects.select_related("shelf")})


def book_detail(request, pk):
    return render(request, "catalog/detail.html", {"book": get_object_or_404(Book, pk=pk)})
