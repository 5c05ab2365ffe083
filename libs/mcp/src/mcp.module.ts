import { Module } from '@nestjs/common';
import { ContextsModule } from '../../contexts/src/contexts.module';
import { OpenAIModule } from '../../dialects/src/openai/openai.module';
import { McpController } from './mcp.controller';
import { McpService } from './mcp.service';

/** MCP (POST /mcp, protocol 2026-07-28) on the official SDK: the /v1 routes as tools, the caller's contexts as resources. */
@Module({ imports: [OpenAIModule, ContextsModule], controllers: [McpController], providers: [McpService] })
export class McpModule {}
