"""The public catalogue pages and the admin."""
from django.contrib import admin
from django.urls import path

from catalog import views

urlpatterns = [
    path("", views.book_list, name="book-list"),
    path("books/<int:pk>/", views.book_detail, name="book-detail"),
    path("admin/", admin.site.urls),
]
