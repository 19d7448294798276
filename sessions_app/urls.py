# Mounted at "api/v1/" rather than "api/v1/sessions": sub-routes under a slash-less include would start with "/",
# which Django's URL checks warn about (urls.W002).
from django.urls import path

from sessions_app import views

urlpatterns = [
    path("sessions", views.sessions),
    path("sessions/<str:session_id>", views.session_detail),
    path("sessions/<str:session_id>/messages", views.add_message),
    path("sessions/<str:session_id>/messages/batch", views.add_messages_batch),
    path("sessions/<str:session_id>/context", views.session_context),
    path("sessions/<str:session_id>/commit", views.commit_session),
]
