"""Request and response bodies of the OpenAI-compatible facade (`/v1`): OpenAI's shapes, lenient
about the parameters the facade does not use."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class OpenAIBody(BaseModel):
    """OpenAI clients send many optional parameters (sampling, metadata...); the facade
    accepts and ignores the ones it does not use instead of refusing the request. Client-side
    tools are the exception (see `ChatCompletionRequest`): ignoring them would fail silently."""

    model_config = ConfigDict(extra="ignore")


CLIENT_TOOLS_REFUSED = (
    "not supported yet: a request with client-side tools is refused with 400 "
    "tools_not_supported (Tally runs its own tools inside the turn)"
)


class ChatMessageIn(OpenAIBody):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None


class StreamOptions(OpenAIBody):
    include_usage: bool = False


class ChatCompletionRequest(OpenAIBody):
    model: Annotated[str, Field(min_length=1, max_length=200)]
    messages: Annotated[list[ChatMessageIn], Field(min_length=1)]
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: Annotated[str, Field(min_length=1, max_length=200)] | None = Field(
        None, description="the end user: names the session when X-Tally-Session is absent"
    )
    n: Annotated[int, Field(ge=1, le=1, description="only one choice is produced")] = 1
    # Client-side tools: declared so that the facade can refuse them (400 tools_not_supported)
    # instead of ignoring them like other unused parameters.
    tools: list[Any] | None = Field(None, description=CLIENT_TOOLS_REFUSED)
    tool_choice: Any = Field(None, description=CLIENT_TOOLS_REFUSED)
    functions: list[Any] | None = Field(None, description=CLIENT_TOOLS_REFUSED)
    function_call: Any = Field(None, description=CLIENT_TOOLS_REFUSED)


class OpenAITextPartIn(OpenAIBody):
    type: Literal["text"]
    text: str


class ImageUrlIn(OpenAIBody):
    url: str = Field(description="a data: URL, data:image/png;base64,...")
    detail: str | None = None


class OpenAIImagePartIn(OpenAIBody):
    type: Literal["image_url"]
    image_url: ImageUrlIn


OpenAIContentPartIn = Annotated[OpenAITextPartIn | OpenAIImagePartIn, Field(discriminator="type")]


class PromptTokensDetails(BaseModel):
    cached_tokens: int


class CompletionUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails


class AssistantMessageOut(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class ChatCompletionChoice(BaseModel):
    index: int = 0
    message: AssistantMessageOut
    finish_reason: Literal["stop"] = "stop"
    logprobs: None = None


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatCompletionChoice]
    usage: CompletionUsage


class ChatCompletionChunkChoice(BaseModel):
    index: int = 0
    delta: dict[str, str]
    finish_reason: Literal["stop"] | None = None
    logprobs: None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChatCompletionChunkChoice]
    usage: CompletionUsage | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "tally"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]
