// The official MCP TypeScript SDK as the host of `sendonce mcp` over stdio:
// it calls send_email once and answers the server's elicitation with
// ELICIT_ANSWER ("accept", "decline", or "none": no elicitation
// capability). It prints what it saw as one JSON line.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const answer = process.env.ELICIT_ANSWER;
const [command, ...args] = JSON.parse(process.env.SENDONCE_MCP_COMMAND);
const capabilities = answer === "none" ? {} : { elicitation: {} };
const client = new Client({ name: "ts-host", version: "1" }, { capabilities });
const asked = [];
if (answer !== "none") {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.push(req.params.message);
    return answer === "accept" ? { action: "accept", content: { approve: true } } : { action: "decline" };
  });
}
await client.connect(new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" }));
const res = await client.callTool({ name: "send_email", arguments: JSON.parse(process.env.TOOL_ARGS) });
console.log(JSON.stringify({ asked, isError: res.isError ?? false, result: res.structuredContent ?? null }));
await client.close();
