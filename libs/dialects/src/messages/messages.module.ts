import { Module } from '@nestjs/common';
import { MessagesController } from './messages.controller';

/** The messages dialect under /v1/messages. */
@Module({ controllers: [MessagesController] })
export class MessagesModule {}
