"""``POST /webhooks/{platform}/{bot_id}``: platform pushes, verified by each adapter."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from gateway.errors import documented
from gateway.supervisor import PlatformSupervisor

router = APIRouter(tags=["webhooks"])


@router.post("/webhooks/{platform}/{bot_id}", responses=documented(401, 403, 404, 422, 503))
async def receive(platform: str, bot_id: str, request: Request) -> Response:
    """Hand the raw request to the bot's handler; unknown bots get 404, nothing stored."""
    supervisor: PlatformSupervisor = request.app.state.supervisor
    handler = supervisor.webhook(platform, bot_id)
    if handler is None:
        return JSONResponse({"error": f"no {platform} bot {bot_id!r} here"}, status_code=404)
    headers = {k.lower(): v for k, v in request.headers.items()}
    result = await handler.handle(headers, await request.body())
    retry = {"Retry-After": str(result.retry_after)} if result.retry_after is not None else None
    return Response(
        content=result.body,
        status_code=result.status,
        media_type=result.content_type,
        headers=retry,
    )
