#!/usr/bin/env node
// The MCP conformance suite's reference server, on stdio: the file
// examples/servers/typescript/everything-server.ts of
// https://github.com/modelcontextprotocol/conformance at tag v0.1.9
// (Copyright Anthropic, PBC; MIT License), with its Express / Streamable
// HTTP part replaced by the SDK's StdioServerTransport (the last lines)
// and its TypeScript types stripped by esbuild. toolgate's
// tests/peer/conformance.sh runs the suite against `toolgate serve --http`
// fronting it.
import {
  McpServer,
  ResourceTemplate
} from "@modelcontextprotocol/sdk/server/mcp.js";
import {
  ElicitResultSchema,
  ListToolsRequestSchema
} from "@modelcontextprotocol/sdk/types.js";
import { zodToJsonSchema } from "zod-to-json-schema";
import { z } from "zod";
import { randomUUID } from "crypto";
const resourceSubscriptions = /* @__PURE__ */ new Set();
const watchedResourceContent = "Watched resource content";
const transports = {};
const servers = {};
const eventStoreData = /* @__PURE__ */ new Map();
function createEventStore() {
  return {
    async storeEvent(streamId, message) {
      const eventId = `${streamId}::${Date.now()}_${randomUUID()}`;
      eventStoreData.set(eventId, { eventId, message, streamId });
      return eventId;
    },
    async replayEventsAfter(lastEventId, { send }) {
      const streamId = lastEventId.split("::")[0];
      const eventsToReplay = [];
      for (const [eventId, data] of eventStoreData.entries()) {
        if (data.streamId === streamId && eventId > lastEventId) {
          eventsToReplay.push([eventId, data]);
        }
      }
      eventsToReplay.sort(([a], [b]) => a.localeCompare(b));
      for (const [eventId, { message }] of eventsToReplay) {
        if (Object.keys(message).length > 0) {
          await send(eventId, message);
        }
      }
      return streamId;
    }
  };
}
const TEST_IMAGE_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const TEST_AUDIO_BASE64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";
const JSON_SCHEMA_2020_12_INPUT_SCHEMA = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  $defs: {
    address: {
      type: "object",
      properties: {
        street: { type: "string" },
        city: { type: "string" }
      }
    }
  },
  properties: {
    name: { type: "string" },
    address: { $ref: "#/$defs/address" }
  },
  additionalProperties: false
};
function createMcpServer() {
  const mcpServer = new McpServer(
    {
      name: "mcp-conformance-test-server",
      version: "1.0.0"
    },
    {
      capabilities: {
        tools: {
          listChanged: true
        },
        resources: {
          subscribe: true,
          listChanged: true
        },
        prompts: {
          listChanged: true
        },
        logging: {},
        completions: {}
      }
    }
  );
  function sendLog(level, message, data) {
    mcpServer.server.notification({
      method: "notifications/message",
      params: {
        level,
        logger: "conformance-test-server",
        data: data || message
      }
    }).catch(() => {
    });
  }
  mcpServer.tool(
    "test_simple_text",
    "Tests simple text content response",
    {},
    async () => {
      return {
        content: [
          { type: "text", text: "This is a simple text response for testing." }
        ]
      };
    }
  );
  mcpServer.registerTool(
    "test_image_content",
    {
      description: "Tests image content response"
    },
    async () => {
      return {
        content: [
          { type: "image", data: TEST_IMAGE_BASE64, mimeType: "image/png" }
        ]
      };
    }
  );
  mcpServer.registerTool(
    "test_audio_content",
    {
      description: "Tests audio content response"
    },
    async () => {
      return {
        content: [
          { type: "audio", data: TEST_AUDIO_BASE64, mimeType: "audio/wav" }
        ]
      };
    }
  );
  mcpServer.registerTool(
    "test_embedded_resource",
    {
      description: "Tests embedded resource content response"
    },
    async () => {
      return {
        content: [
          {
            type: "resource",
            resource: {
              uri: "test://embedded-resource",
              mimeType: "text/plain",
              text: "This is an embedded resource content."
            }
          }
        ]
      };
    }
  );
  mcpServer.registerTool(
    "test_multiple_content_types",
    {
      description: "Tests response with multiple content types (text, image, resource)"
    },
    async () => {
      return {
        content: [
          { type: "text", text: "Multiple content types test:" },
          { type: "image", data: TEST_IMAGE_BASE64, mimeType: "image/png" },
          {
            type: "resource",
            resource: {
              uri: "test://mixed-content-resource",
              mimeType: "application/json",
              text: JSON.stringify({ test: "data", value: 123 })
            }
          }
        ]
      };
    }
  );
  mcpServer.registerTool(
    "test_tool_with_logging",
    {
      description: "Tests tool that emits log messages during execution",
      inputSchema: {}
      // Empty schema so callback gets (args, extra) instead of just (extra)
    },
    async (_args, { sendNotification }) => {
      await sendNotification({
        method: "notifications/message",
        params: {
          level: "info",
          data: "Tool execution started"
        }
      });
      await new Promise((resolve) => setTimeout(resolve, 50));
      await sendNotification({
        method: "notifications/message",
        params: {
          level: "info",
          data: "Tool processing data"
        }
      });
      await new Promise((resolve) => setTimeout(resolve, 50));
      await sendNotification({
        method: "notifications/message",
        params: {
          level: "info",
          data: "Tool execution completed"
        }
      });
      return {
        content: [
          { type: "text", text: "Tool with logging executed successfully" }
        ]
      };
    }
  );
  mcpServer.registerTool(
    "test_tool_with_progress",
    {
      description: "Tests tool that reports progress notifications",
      inputSchema: {}
      // Empty schema so callback gets (args, extra) instead of just (extra)
    },
    async (_args, { sendNotification, _meta }) => {
      const progressToken = _meta?.progressToken ?? 0;
      console.log("???? Progress token:", progressToken);
      await sendNotification({
        method: "notifications/progress",
        params: {
          progressToken,
          progress: 0,
          total: 100,
          message: `Completed step ${0} of ${100}`
        }
      });
      await new Promise((resolve) => setTimeout(resolve, 50));
      await sendNotification({
        method: "notifications/progress",
        params: {
          progressToken,
          progress: 50,
          total: 100,
          message: `Completed step ${50} of ${100}`
        }
      });
      await new Promise((resolve) => setTimeout(resolve, 50));
      await sendNotification({
        method: "notifications/progress",
        params: {
          progressToken,
          progress: 100,
          total: 100,
          message: `Completed step ${100} of ${100}`
        }
      });
      return {
        content: [{ type: "text", text: String(progressToken) }]
      };
    }
  );
  mcpServer.registerTool(
    "test_error_handling",
    {
      description: "Tests error response handling"
    },
    async () => {
      throw new Error("This tool intentionally returns an error for testing");
    }
  );
  mcpServer.registerTool(
    "test_reconnection",
    {
      description: "Tests SSE stream disconnection and client reconnection (SEP-1699). Server will close the stream mid-call and send the result after client reconnects.",
      inputSchema: {}
    },
    async (_args, { sessionId, requestId }) => {
      const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
      console.log(`[${sessionId}] Starting test_reconnection tool...`);
      const transport = sessionId ? transports[sessionId] : void 0;
      if (transport && requestId) {
        console.log(
          `[${sessionId}] Closing SSE stream to trigger client polling...`
        );
        transport.closeSSEStream(requestId);
      }
      await sleep(100);
      console.log(`[${sessionId}] test_reconnection tool complete`);
      return {
        content: [
          {
            type: "text",
            text: "Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure."
          }
        ]
      };
    }
  );
  mcpServer.registerTool(
    "test_sampling",
    {
      description: "Tests server-initiated sampling (LLM completion request)",
      inputSchema: {
        prompt: z.string().describe("The prompt to send to the LLM")
      }
    },
    async (args) => {
      try {
        const result = await mcpServer.server.request(
          {
            method: "sampling/createMessage",
            params: {
              messages: [
                {
                  role: "user",
                  content: {
                    type: "text",
                    text: args.prompt
                  }
                }
              ],
              maxTokens: 100
            }
          },
          z.object({ method: z.literal("sampling/createMessage") }).passthrough()
        );
        const samplingResult = result;
        const modelResponse = samplingResult.content?.text || samplingResult.message?.content?.text || "No response";
        return {
          content: [
            {
              type: "text",
              text: `LLM response: ${modelResponse}`
            }
          ]
        };
      } catch (error) {
        return {
          content: [
            {
              type: "text",
              text: `Sampling not supported or error: ${error.message}`
            }
          ]
        };
      }
    }
  );
  mcpServer.registerTool(
    "test_elicitation",
    {
      description: "Tests server-initiated elicitation (user input request)",
      inputSchema: {
        message: z.string().describe("The message to show the user")
      }
    },
    async (args) => {
      try {
        const result = await mcpServer.server.request(
          {
            method: "elicitation/create",
            params: {
              message: args.message,
              requestedSchema: {
                type: "object",
                properties: {
                  response: {
                    type: "string",
                    description: "User's response"
                  }
                },
                required: ["response"]
              }
            }
          },
          ElicitResultSchema
        );
        const elicitResult = result;
        return {
          content: [
            {
              type: "text",
              text: `User response: action=${elicitResult.action}, content=${JSON.stringify(elicitResult.content || {})}`
            }
          ]
        };
      } catch (error) {
        return {
          content: [
            {
              type: "text",
              text: `Elicitation not supported or error: ${error.message}`
            }
          ]
        };
      }
    }
  );
  mcpServer.registerTool(
    "test_elicitation_sep1034_defaults",
    {
      description: "Tests elicitation with default values per SEP-1034",
      inputSchema: {}
    },
    async () => {
      try {
        const result = await mcpServer.server.request(
          {
            method: "elicitation/create",
            params: {
              message: "Please review and update the form fields with defaults",
              requestedSchema: {
                type: "object",
                properties: {
                  name: {
                    type: "string",
                    description: "User name",
                    default: "John Doe"
                  },
                  age: {
                    type: "integer",
                    description: "User age",
                    default: 30
                  },
                  score: {
                    type: "number",
                    description: "User score",
                    default: 95.5
                  },
                  status: {
                    type: "string",
                    description: "User status",
                    enum: ["active", "inactive", "pending"],
                    default: "active"
                  },
                  verified: {
                    type: "boolean",
                    description: "Verification status",
                    default: true
                  }
                },
                required: []
              }
            }
          },
          ElicitResultSchema
        );
        const elicitResult = result;
        return {
          content: [
            {
              type: "text",
              text: `Elicitation completed: action=${elicitResult.action}, content=${JSON.stringify(elicitResult.content || {})}`
            }
          ]
        };
      } catch (error) {
        return {
          content: [
            {
              type: "text",
              text: `Elicitation not supported or error: ${error.message}`
            }
          ]
        };
      }
    }
  );
  mcpServer.registerTool(
    "test_elicitation_sep1330_enums",
    {
      description: "Tests elicitation with enum schema improvements per SEP-1330",
      inputSchema: {}
    },
    async () => {
      try {
        const result = await mcpServer.server.request(
          {
            method: "elicitation/create",
            params: {
              message: "Please select options from the enum fields",
              requestedSchema: {
                type: "object",
                properties: {
                  // Untitled single-select enum (basic)
                  untitledSingle: {
                    type: "string",
                    description: "Select one option",
                    enum: ["option1", "option2", "option3"]
                  },
                  // Titled single-select enum (using oneOf with const/title)
                  titledSingle: {
                    type: "string",
                    description: "Select one option with titles",
                    oneOf: [
                      { const: "value1", title: "First Option" },
                      { const: "value2", title: "Second Option" },
                      { const: "value3", title: "Third Option" }
                    ]
                  },
                  // Legacy titled enum (using enumNames - deprecated)
                  legacyEnum: {
                    type: "string",
                    description: "Select one option (legacy)",
                    enum: ["opt1", "opt2", "opt3"],
                    enumNames: ["Option One", "Option Two", "Option Three"]
                  },
                  // Untitled multi-select enum
                  untitledMulti: {
                    type: "array",
                    description: "Select multiple options",
                    minItems: 1,
                    maxItems: 3,
                    items: {
                      type: "string",
                      enum: ["option1", "option2", "option3"]
                    }
                  },
                  // Titled multi-select enum (using anyOf with const/title)
                  titledMulti: {
                    type: "array",
                    description: "Select multiple options with titles",
                    minItems: 1,
                    maxItems: 3,
                    items: {
                      anyOf: [
                        { const: "value1", title: "First Choice" },
                        { const: "value2", title: "Second Choice" },
                        { const: "value3", title: "Third Choice" }
                      ]
                    }
                  }
                },
                required: []
              }
            }
          },
          ElicitResultSchema
        );
        const elicitResult = result;
        return {
          content: [
            {
              type: "text",
              text: `Elicitation completed: action=${elicitResult.action}, content=${JSON.stringify(elicitResult.content || {})}`
            }
          ]
        };
      } catch (error) {
        return {
          content: [
            {
              type: "text",
              text: `Elicitation not supported or error: ${error.message}`
            }
          ]
        };
      }
    }
  );
  mcpServer.registerTool(
    "json_schema_2020_12_tool",
    {
      description: "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
      inputSchema: {
        name: z.string().optional(),
        address: z.object({
          street: z.string().optional(),
          city: z.string().optional()
        }).optional()
      }
    },
    async (args) => {
      return {
        content: [
          {
            type: "text",
            text: `JSON Schema 2020-12 tool called with: ${JSON.stringify(args)}`
          }
        ]
      };
    }
  );
  mcpServer.registerResource(
    "static-text",
    "test://static-text",
    {
      title: "Static Text Resource",
      description: "A static text resource for testing",
      mimeType: "text/plain"
    },
    async () => {
      return {
        contents: [
          {
            uri: "test://static-text",
            mimeType: "text/plain",
            text: "This is the content of the static text resource."
          }
        ]
      };
    }
  );
  mcpServer.registerResource(
    "static-binary",
    "test://static-binary",
    {
      title: "Static Binary Resource",
      description: "A static binary resource (image) for testing",
      mimeType: "image/png"
    },
    async () => {
      return {
        contents: [
          {
            uri: "test://static-binary",
            mimeType: "image/png",
            blob: TEST_IMAGE_BASE64
          }
        ]
      };
    }
  );
  mcpServer.registerResource(
    "template",
    new ResourceTemplate("test://template/{id}/data", {
      list: void 0
    }),
    {
      title: "Resource Template",
      description: "A resource template with parameter substitution",
      mimeType: "application/json"
    },
    async (uri, variables) => {
      const id = variables.id;
      return {
        contents: [
          {
            uri: uri.toString(),
            mimeType: "application/json",
            text: JSON.stringify({
              id,
              templateTest: true,
              data: `Data for ID: ${id}`
            })
          }
        ]
      };
    }
  );
  mcpServer.registerResource(
    "watched-resource",
    "test://watched-resource",
    {
      title: "Watched Resource",
      description: "A resource that auto-updates every 3 seconds",
      mimeType: "text/plain"
    },
    async () => {
      return {
        contents: [
          {
            uri: "test://watched-resource",
            mimeType: "text/plain",
            text: watchedResourceContent
          }
        ]
      };
    }
  );
  mcpServer.server.setRequestHandler(
    z.object({ method: z.literal("resources/subscribe") }).passthrough(),
    async (request) => {
      const uri = request.params.uri;
      resourceSubscriptions.add(uri);
      sendLog("info", `Subscribed to resource: ${uri}`);
      return {};
    }
  );
  mcpServer.server.setRequestHandler(
    z.object({ method: z.literal("resources/unsubscribe") }).passthrough(),
    async (request) => {
      const uri = request.params.uri;
      resourceSubscriptions.delete(uri);
      sendLog("info", `Unsubscribed from resource: ${uri}`);
      return {};
    }
  );
  mcpServer.registerPrompt(
    "test_simple_prompt",
    {
      title: "Simple Test Prompt",
      description: "A simple prompt without arguments"
    },
    async () => {
      return {
        messages: [
          {
            role: "user",
            content: {
              type: "text",
              text: "This is a simple prompt for testing."
            }
          }
        ]
      };
    }
  );
  mcpServer.registerPrompt(
    "test_prompt_with_arguments",
    {
      title: "Prompt With Arguments",
      description: "A prompt with required arguments",
      argsSchema: {
        arg1: z.string().describe("First test argument"),
        arg2: z.string().describe("Second test argument")
      }
    },
    async (args) => {
      const { arg1, arg2 } = args;
      return {
        messages: [
          {
            role: "user",
            content: {
              type: "text",
              text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'`
            }
          }
        ]
      };
    }
  );
  mcpServer.registerPrompt(
    "test_prompt_with_embedded_resource",
    {
      title: "Prompt With Embedded Resource",
      description: "A prompt that includes an embedded resource",
      argsSchema: {
        resourceUri: z.string().describe("URI of the resource to embed")
      }
    },
    async (args) => {
      const uri = args.resourceUri;
      return {
        messages: [
          {
            role: "user",
            content: {
              type: "resource",
              resource: {
                uri,
                mimeType: "text/plain",
                text: "Embedded resource content for testing."
              }
            }
          },
          {
            role: "user",
            content: {
              type: "text",
              text: "Please process the embedded resource above."
            }
          }
        ]
      };
    }
  );
  mcpServer.registerPrompt(
    "test_prompt_with_image",
    {
      title: "Prompt With Image",
      description: "A prompt that includes image content"
    },
    async () => {
      return {
        messages: [
          {
            role: "user",
            content: {
              type: "image",
              data: TEST_IMAGE_BASE64,
              mimeType: "image/png"
            }
          },
          {
            role: "user",
            content: { type: "text", text: "Please analyze the image above." }
          }
        ]
      };
    }
  );
  mcpServer.server.setRequestHandler(
    z.object({ method: z.literal("logging/setLevel") }).passthrough(),
    async (request) => {
      const level = request.params.level;
      sendLog("info", `Log level set to: ${level}`);
      return {};
    }
  );
  mcpServer.server.setRequestHandler(
    z.object({ method: z.literal("completion/complete") }).passthrough(),
    async (_request) => {
      return {
        completion: {
          values: [],
          total: 0,
          hasMore: false
        }
      };
    }
  );
  mcpServer.server.setRequestHandler(
    ListToolsRequestSchema,
    () => {
      const registeredTools = mcpServer._registeredTools;
      return {
        tools: Object.entries(registeredTools).filter(([, tool]) => tool.enabled).map(([name, tool]) => {
          if (name === "json_schema_2020_12_tool") {
            return {
              name,
              description: tool.description,
              inputSchema: JSON_SCHEMA_2020_12_INPUT_SCHEMA
            };
          }
          let inputSchema;
          if (!tool.inputSchema) {
            inputSchema = { type: "object", properties: {} };
          } else if ("_def" in tool.inputSchema) {
            inputSchema = zodToJsonSchema(tool.inputSchema, {
              strictUnions: true
            });
          } else if (typeof tool.inputSchema === "object" && Object.keys(tool.inputSchema).length > 0) {
            inputSchema = zodToJsonSchema(z.object(tool.inputSchema), {
              strictUnions: true
            });
          } else {
            inputSchema = { type: "object", properties: {} };
          }
          return {
            name,
            title: tool.title,
            description: tool.description,
            inputSchema,
            annotations: tool.annotations,
            _meta: tool._meta
          };
        })
      };
    }
  );
  return mcpServer;
}
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
const server = createMcpServer();
await server.connect(new StdioServerTransport());
