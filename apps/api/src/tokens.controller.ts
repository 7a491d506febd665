import { Body, Controller, Delete, Get, Param, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiProperty, ApiTags } from '@nestjs/swagger';
import { IsIn, IsString, Length } from 'class-validator';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { API_ROLES, CreateApiTokenCommand, ListApiTokensQuery, RevokeApiTokenCommand, type ApiRole } from '@assay/ledger';
import { Roles } from './access';

class CreateTokenDto {
  @ApiProperty({ enum: API_ROLES })
  @IsIn(API_ROLES as unknown as string[])
  role!: ApiRole;

  @ApiProperty({ description: '1-64 characters: letters, digits, space and . _ @ : -' })
  @IsString()
  @Length(1, 64)
  name!: string;
}

/**
 * API tokens over HTTP (admin only): the same table and the same commands as `assay tokens`. A created token is in
 * the answer only.
 */
@ApiTags('tokens')
@ApiBearerAuth()
@Controller('tokens')
export class TokensController {
  constructor(
    private readonly commands: CommandBus,
    private readonly queries: QueryBus,
  ) {}

  @Get()
  @Roles('admin')
  @ApiOperation({ summary: 'list the API tokens (ids, names, roles, times; never a token or its hash)' })
  async list() {
    return { tokens: (await this.queries.execute(new ListApiTokensQuery())).tokens };
  }

  @Post()
  @Roles('admin')
  @ApiOperation({ summary: 'create a token of a role; the token is in this answer only' })
  async create(@Body() body: CreateTokenDto) {
    const { path: _path, ...created } = await this.commands.execute(new CreateApiTokenCommand(body.role, body.name));
    return created;
  }

  @Delete(':id')
  @Roles('admin')
  @ApiOperation({ summary: 'revoke a token: it stops working at the next request' })
  revoke(@Param('id') id: string) {
    return this.commands.execute(new RevokeApiTokenCommand(id));
  }
}
