from django.urls import path

from ovsite import views

urlpatterns = [
    path("accounts", views.admin_accounts),
    path("accounts/<str:account>/users", views.admin_users),
    path("accounts/<str:account>/users/<str:user>/key", views.admin_user_key),
]
