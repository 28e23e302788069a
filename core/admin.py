"""What the apps' admins share. Decisions are records: the admin shows them read-only."""

from django.contrib import admin


class ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
